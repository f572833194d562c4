"""Controller request handlers: kio request + current image -> records + response (see bridge.api)."""

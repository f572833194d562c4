"""Decode and encode the data of every znode Kafka writes, as Kafka 3.9 writes it: one module per znode family.

Kafka serialises Java/Scala maps with a default Jackson ObjectMapper, so the key order of its JSON is the
iteration order of the map it built; the codecs take those orders from `migrate.jvm` so the encoders give
Kafka's exact bytes wherever Kafka's own output does not depend on its caller. `jackson` holds the JSON
reading and writing every codec shares; decoders raise only `ZnodeFormatError`.
"""

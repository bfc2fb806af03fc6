"""The ingress: tenants' own Kafka topics in, Kadence's input topics out (docs/security.md)."""

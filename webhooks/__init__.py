"""Webhooks: the endpoints a studio registers and the delivery of alerts to them (ports.issues'
outbox), for crash groups' alerts and any other's."""

"""Chat channels: platform adapters, the gateway, durable deliveries and the supervisor.

platform -> adapter -> supervisor -> gateway -> turn job -> agent
               ^                                   |
               +--------- delivery job <-----------+

The runtime creates a `ChannelService` (habakkuk.channels.service) when the
config has a `channels:` section; modules here are imported lazily so the
CLI stays fast.
"""

"""The runtime's domain services: typed objects `habakkuk.runtime.Runtime` builds and exposes.

Each owns one concern (sessions, turns, session settings, approvals, checkpoints, usage,
the control-room overview, provider setup, the doctor's checks); surfaces reach them
through the runtime, typed by a narrow Protocol of what they use. They sit below the
runtime and above the server and channels.
"""

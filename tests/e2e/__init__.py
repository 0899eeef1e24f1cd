"""The opt-in end-to-end harness: real control planes on loopback, a fake kubelet, stand-in charts, the real Pulumi engine.

Run it with `scripts/e2e.sh` (docs/e2e.md). Nothing here is collected by the default test run.
"""

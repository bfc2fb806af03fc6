"""The shared test kit: stack harness, checker, network proxy, scenarios, the test driver."""

"""Provider-neutral model types, the provider interface, the router and the mock provider."""

"""Token-length drift: prompt and generation token lengths tested against a reference, without payloads."""

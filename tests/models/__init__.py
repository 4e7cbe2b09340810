"""Model providers and clients: the wire formats, scripted and sampling clients, provider configuration."""

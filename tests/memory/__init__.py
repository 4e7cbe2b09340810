"""`~/memory`: path rules, shapes, refusals, odd names, bounded pages."""

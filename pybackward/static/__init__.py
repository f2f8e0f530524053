"""A small, Paddle-shaped program builder (see the module docs once it lands)."""

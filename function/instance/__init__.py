"""What one instance of the function holds: its settings (read once, strict), its model (one cached
factory, loaded during INIT and borrowed by requests), the artifact it loads, and the record of its start."""

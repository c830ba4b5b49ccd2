"""Live progress as Server-Sent Events, and the tokens and credentials that open and keep streams."""

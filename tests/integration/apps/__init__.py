"""Service apps as integration tests run them with one fault built in."""

"""Registry service: agents' capability profiles and capability-first filtering."""

"""Installing skills and plugins: sources, safe unpacking, the scan, the tree hash, the
lock file and the backups (spec 000 "Skills: Installing", "Plugins")."""

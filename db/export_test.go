package db

// Test hooks: the migration run and check over a test's own migration files.
var (
	MigrateFS = migrateFS
	CheckFS   = checkFS
)

package installer

import "context"

// SetRename replaces the rename the installer uses until the test ends.
func SetRename(f func(from, to string) error) (restore func()) {
	old := rename
	rename = f
	return func() { rename = old }
}

// Lock takes the plugin directory's lock as an operation does.
func (i *Installer) Lock(ctx context.Context) (func(), error) { return i.lock(ctx) }

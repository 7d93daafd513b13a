// Package installer installs, updates, removes and lists the plugins in a
// plugin directory: what `hookroom plugin install|update|remove|list` do.
//
// # Sources
//
// Install takes one of:
//
//   - a local directory, copied;
//   - a .tar.gz (or .tgz) archive, extracted safely: absolute paths, ".."
//     components, hard links, device files, FIFOs and symbolic links that
//     point outside the archive are refused, as are archives past
//     Options.MaxSize bytes or Options.MaxFiles entries; the plugin is the
//     archive's root, or its single top-level directory;
//   - a git repository, cloned shallowly with the git program under
//     Options.GitTimeout: an https://, http://, ssh://, git:// or file://
//     URL, user@host:path, or anything prefixed "git+" ("git+/srv/repo"),
//     with an optional "#ref" (a branch, a tag or a full commit hash).
//
// Whatever the source, these are never part of an installed plugin: .git
// directories, __pycache__ directories and *.pyc files.
//
// # Steps
//
// The plugin is unpacked into a staging directory inside the plugin
// directory (".hookroom-staging-*", so the final move is a rename on one
// file system), its manifest is read and validated by plugins.ReadManifest,
// its hookroom version range is checked against Options.HookroomVersion
// (plugins.CheckCompatible), its checksum is taken, and Options.Gate is
// asked (the bot backs it with the plugin:before_install hooks). Only then
// is it renamed into <dir>/<name>. An update first renames the installed
// version aside (".<name>.backup-*"), renames the new one in and writes the
// lock file; if any of that fails, the old version is renamed back, so a
// failed update leaves the old version installed, loadable and in the lock
// file. Nothing is ever half-copied into <dir>/<name>.
//
// # Lock file
//
// <dir>/hookroom-plugins.lock is JSON, written atomically (a temporary
// file renamed over it), entries sorted by name, two-space indented:
//
//	{
//	  "lock_version": 1,
//	  "plugins": [
//	    {
//	      "name": "geo",
//	      "version": "1.2.0",
//	      "source": "https://git.example.org/geo.git",
//	      "source_type": "git",
//	      "ref": "v1.2.0",
//	      "commit": "3f1c…",
//	      "checksum": "sha256:9b2e…",
//	      "installed_at": "2026-11-29T04:33:10Z"
//	    }
//	  ]
//	}
//
// A git URL's password is never written (nor shown): give git its
// credentials through a credential helper instead.
//
// # Checksum
//
// Checksum is "sha256:" and the hex SHA-256 of the plugin's file tree: for
// every entry below the root (the root itself excluded, the exclusions
// above skipped), sorted bytewise by its slash-separated relative path, the
// bytes
//
//	TYPE NUL PATH NUL PERM NUL DATA NUL
//
// where TYPE is "d" (directory), "f" (regular file) or "l" (symbolic
// link), PERM the permission bits as four octal digits ("0755"), and DATA
// the hex SHA-256 of a file's content, a link's target, or empty for a
// directory. List recomputes it to report drift: files changed, added or
// removed since the install.
//
// # Concurrency
//
// Every operation holds an exclusive lock on <dir>/.hookroom-install.lock
// (flock(2) where available), waiting up to Options.LockWait for another
// invocation to finish, so two commands never interleave.
package installer

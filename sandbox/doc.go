// Package sandbox confines the programs hookroom starts on behalf of plugins
// (process plugins, MCP servers) with Landlock, the unprivileged Linux
// access-control system (kernel 5.13 and later).
//
// A Policy lists the paths a program may read and execute and the paths it
// may also write; everything else on the file system is out of its reach —
// hookroom's database, its configuration and credentials, other plugins'
// state, the operator's home directory, /proc (and with it the server's
// /proc/<pid>/environ), and /dev but for the few device nodes programs open
// (/dev/shm, a tmpfs that may hold the database, included). Where the kernel has Landlock ABI 6 the program
// cannot signal processes outside its sandbox or reach their abstract Unix
// sockets either. The network is not restricted: plugins call APIs.
//
// Start is called instead of exec.Cmd.Start: it starts the command from an
// operating-system thread of its own that it confines first, so the
// restriction is inherited by the child and never reaches the server's other
// threads (the thread is discarded afterwards). Available says whether the
// running kernel supports it; on other systems Start reports
// ErrUnsupported and callers decide whether to run the program unconfined.
package sandbox

// Package sdk lets the same Go plugin code run built into hookroom or as a
// process plugin. A plugin is a Plugin value: hooks declared with
// hooks.Handle, tools as plugins.Tool. Register it as a built-in with
// plugins.RegisterBuiltin(p.Builtin()), or build a binary whose main calls
// sdk.Main(p) and point a plugin manifest's command at it: the SDK speaks
// the protocol on stdin and stdout, rebuilds each hook's typed context from
// JSON, runs the typed handler with its context helpers (settings, state
// directory, logger, send message, room state) served by the host over
// RPC, and answers with the event's designated fields.
//
// One difference remains between the modes: in a process, c.Emit reaches
// only the process's own hooks; use sdk.Emit(ctx, c, name, payload), which
// asks the host in a process and is c.Emit built in.
package sdk

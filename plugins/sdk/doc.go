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
// c.Emit behaves the same in both modes: in a process the SDK forwards the
// custom event to the host (hooks.Services.Events), whose registry holds
// every plugin's hooks. sdk.Emit does the same from code that has a hook
// context but not its helpers at hand.
package sdk

// Package trace records what happened in one turn, bounded, so that an
// operator can see it afterwards in the console's turn inspector: the
// turn's stages (received → routed → first token → first visible →
// final), every hook that ran with its mode, duration, outcome and the
// change it made, each model request, each tool call, the approvals and the
// delivery.
//
// A turn creates a Recorder and carries it in its context (WithRecorder);
// the pieces of hookroom that take part in the turn find it with From and
// add to it. Every method of a nil *Recorder does nothing, so code that
// runs outside a recorded turn needs no checks. When the turn ends,
// Recorder.Finish returns the Trace and the Store keeps it until the
// retention passes (Store.Prune).
//
// Recording never blocks a turn and never changes what the turn does:
// hooks, history and replay behave exactly as without it. Everything a
// trace holds is bounded (Limits) and text is cut on UTF-8 boundaries.
//
// Store keeps the traces in the database (SQLite or PostgreSQL): one row
// per turn, its summary in columns the console's lists filter on and the
// rest as JSON that the inspector reads.
//
// trace imports only hooks (for the names of agents and hook modes) and
// internal/database (for its tables).
package trace

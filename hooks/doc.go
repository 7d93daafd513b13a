// Package hooks is hookroom's hook engine: the names of every event, the typed
// context each event carries, the registry of hooks built from plugins, and the
// five execution modes (observer, collector, transformer, gate, claim) with their
// deadlines, failure policies and recursion guard.
//
// The bot emits an event at a fixed point of a turn or of the bot's lifecycle;
// the engine runs every eligible hook of the current registry snapshot in the
// event's mode and returns what the hooks decided. A hook's effects count only
// if it returns successfully before its deadline: each hook works on its own
// copy of the context, so a late, failing or panicking hook can never change
// what the caller or other hooks see.
//
// Hooks run on pooled worker goroutines, watched by one shared deadline
// scheduler, so that a hook that ignores its deadline can be abandoned;
// hooks declared with Inline, which never block, run on the emitting
// goroutine instead and cost no handoff (see docs/hooks.md §3).
//
// A RunObserver (Options.Observer) hears about every hook run: its mode,
// duration and outcome, whether it was abandoned, and its Effect on the
// event's designated fields; emissions started with a context marked by
// WithRunDetail also get a short description of the change
// (HookRun.Change), which costs nothing otherwise.
//
// hooks imports nothing else from hookroom. Host services that hooks may call
// (sending a message, room state, the admin facade) are interfaces defined here
// and implemented by the bot.
package hooks

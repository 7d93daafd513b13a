// Package enrich renders the items that message:enrich and system:enrich hooks
// contribute into the blocks the model sees: the message-context block appended
// to the user turn (persisted in history, so replays are byte-identical), the
// system-context block appended to the system prompt, and the transient block
// sent beside the turn but never stored. Rendering is byte-exact and
// deterministic.
package enrich

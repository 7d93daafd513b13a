// Package enrich renders the items that message:enrich and system:enrich hooks
// contribute into the blocks the model sees: the message-context block appended
// to the user turn (persisted in history, so replays are byte-identical), the
// system-context block appended to the system prompt, and the transient block
// sent beside the turn but never stored. Rendering is byte-exact and
// deterministic.
//
// # Format
//
// Every item renders on three lines, with no trailing newline:
//
//	<item key="KEY" cache_policy="POLICY">
//	TEXT
//	</item>
//
// KEY, POLICY and TEXT are escaped the way Python's html.escape(s, quote=True)
// does it: & → &amp;, < → &lt;, > → &gt;, " → &quot;, ' → &#x27;. Nothing else
// is touched (no Unicode normalization, control characters and invalid UTF-8
// pass through), so a hook's text can never close an item or a block. An
// empty policy is written as "volatile". Items are joined by a single newline
// and wrapped in a block tag on its own line:
//
//	<hookroom_message_context>   items in collector order
//	<hookroom_system_context>    stable items by key, then the rest by key
//	<hookroom_transient_context> non-empty parts joined by a blank line
//
// A block with nothing in it is the empty string, never an empty tag pair.
//
// # One turn
//
// The bot collects message:enrich and system:enrich items and calls Build once
// per turn. Build drops items with an empty or reserved key (see
// ReservedKeys), appends the persisted message items to the user's text
// (Turn.Prompt, which is what session history stores), puts the transient
// ones with the runtime's own transient parts into Turn.Transient (a separate
// user message right before the prompt, never stored), and renders the system
// items into Turn.System (appended to the system prompt for this run only).
//
// Everything here is a pure function of its arguments: safe for concurrent
// use, no I/O, no logging, no clock. Each rendered string is built with a
// single allocation of its exact size.
package enrich

// Package bot is hookroom's composition root and runtime: it wires config,
// Matrix I/O, tracking, the hook engine, agents and plugins together, runs the
// turn pipeline once per inbound Matrix event, fires lifecycle and membership
// events, and implements the host services that hooks call. Besides the
// rooms config.yaml provisions, it serves the rooms its accounts join on
// the invites of people authorization allows (direct messages), which it
// remembers in the database; other invites it declines.
package bot

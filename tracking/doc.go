// Package tracking keeps hookroom's durable bookkeeping in the database: the
// inbound event ledger that hands each Matrix event to the pipeline exactly
// once and replays unhandled events after a crash; the delivery records
// (what was posted in answer to an event) and delivery intents (what was
// about to be posted) that let a replayed turn edit what an earlier run
// posted instead of posting it again; the room-member join markers that make
// room:member_joined fire once per room and user, forever; and the rooms
// hookroom's accounts joined on a person's invite (direct messages), which
// must survive restarts.
package tracking

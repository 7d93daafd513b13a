// Package contextinfo is the built-in plugin "context_info": it tells the
// model what time it is where its users live, and optionally where it is
// talking. Enable it with
//
//	plugins:
//	  - builtin: context_info
//	    settings:
//	      timezone: Europe/Berlin      # IANA name (default: the server's local zone)
//	      format: "Monday, 2 January 2006, 15:04"  # Go time layout of the date and time
//	      timezone_item: true          # add the stable "timezone" item (default true)
//	      transient: false             # keep the time out of stored history (default false)
//	      room_info: true              # add the room's name, alias and topic to the system prompt (default false)
//
// # Items
//
// Its message:enrich hook, add_datetime, adds to every user turn:
//
//   - "datetime" (volatile): "Current date and time: Tuesday, 8 September
//     2026, 14:03", in the configured zone and format. It changes with
//     every turn, so it is volatile; with transient: true it is sent to the
//     model but not stored in the session history (replays then see the
//     turn without it).
//   - "timezone" (stable): "Timezone: Europe/Berlin (CEST, UTC+02:00)". It
//     changes only with daylight saving time, so it is stable.
//
// With room_info: true, its system:enrich hook, add_room_info, adds one
// stable item "room" to the system prompt, read from the room's state
// (m.room.name, m.room.canonical_alias, m.room.topic) through the host:
//
//	You are "assistant" in the Matrix room "Lobby" (#lobby:example.org, !abc:example.org). Room topic: Say hello.
//
// Room state is cached for a minute per room. When the host offers no room
// state service the item names the room id only; a failing state query
// makes the hook contribute nothing for that turn (and is logged).
//
// The format is a Go reference-time layout (Mon Jan 2 15:04:05 MST 2006):
// "2006-01-02 15:04" gives "2026-09-08 14:03". An unknown timezone or a
// format without any date or time element is a load error pointing at the
// setting in config.yaml.
package contextinfo

// Package memory is the built-in plugin "memory": agents' long-term memory
// (package memory at the module's root) plugged in through the hook engine,
// so an operator sees its hooks in hookroom hooks and may reorder, retime
// or disable them like any other plugin's. Enable it with
//
//	plugins:
//	  - builtin: memory
//	    settings:
//	      agents:                       # only these agents remember
//	        assistant:
//	          scopes: [person, room]    # default; add agent for agent-wide memory
//	          recall_limit: 5           # memories recalled per turn
//	          max_per_scope: 1000       # oldest dropped beyond this
//	          extract: true             # after each turn, ask extract's model for facts
//	          tools: true               # remember/recall/forget (default true)
//	      max_text_length: 500
//	      embeddings:                   # optional: hybrid ranking
//	        base_url: http://127.0.0.1:11434/v1
//	        model: nomic-embed-text
//	        api_key: ${EMBEDDINGS_API_KEY}
//	        timeout_ms: 10000
//	      extract:                      # needed by agents with extract: true
//	        provider: openai            # or anthropic
//	        base_url: http://127.0.0.1:11434/v1
//	        model: llama3.1
//	        api_key: ${EXTRACT_API_KEY}
//	        timeout_ms: 30000           # the extract hook's deadline
//	        encrypted_rooms: false      # also extract from encrypted rooms
//
// # Hooks, tools, commands
//
//   - recall (message:enrich, collector): the requester's most relevant
//     memories for the turn's agent and room, as one transient item.
//   - extract (message:after_response, observer; only when an agent has
//     extract): sends the exchange to extract's model, emits the typed
//     transformer event memory:extracted (hooks.MemoryExtractedContext) with
//     the facts it proposes, then stores what its hooks leave as the
//     person's memories: nothing when one vetoes them or the hooks cannot
//     run.
//   - tools remember, recall and forget (Tool.Agents: the agents in settings
//     whose tools is not false), acting for the tool call's requester.
//   - !memory [agent], !memory forget <id> [agent], !memory forget all
//     [agent]: what the agents in the room remember about the sender, and
//     forgetting it for real.
//
// It needs hookroom's database (plugins.Env.DB). A room counts as end-to-end
// encrypted unless the host says otherwise (plugins.Env.Encrypted): its
// memories and queries never reach the embeddings endpoint.
package memory

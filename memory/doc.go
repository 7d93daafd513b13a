// Package memory is agents' long-term memory: what people told an agent,
// kept in hookroom's database and recalled in later conversations. It owns
// the memory store (one table plus its full-text index, on SQLite and
// PostgreSQL), the ranking, the OpenAI-compatible embeddings client, the
// enrichment block, the remember/recall/forget tools and the extraction
// request and its parsing. It knows nothing of Matrix; the built-in plugin
// "memory" (plugins/builtin/memory) plugs it into the hook engine.
//
// # Scopes
//
// Every memory belongs to one agent and one scope:
//
//   - person: about one person (a Matrix user id). It follows the person
//     across rooms and threads, for that agent only.
//   - room: about one room, for anyone the agent answers there.
//   - agent: general, for anyone the agent answers anywhere.
//
// An agent's memory: section (Options) turns memory on and picks its scopes
// (person and room by default); it is off for agents without one.
//
// # Privacy
//
// Privacy is a rule of the Store, not of its callers or of a prompt. Every
// read takes a Who — the agent, the person the turn acts for, the room —
// and the SQL of every read is built from it alone: a person's memories
// come back only for that person, a room's only in that room, an agent's
// only for that agent. No method takes another person's id, so no caller
// can recall someone else's memories, and the tools take who from the tool
// call's context, never from the model's arguments.
//
// Forgetting: a person may forget their own person memories, and the room
// memories (from within that room) and agent memories they told. They may
// not forget what others told, even when they can see it.
// Forget deletes for real: the row, its full-text index entry (SQLite: the
// FTS5 delete trigger; PostgreSQL: the GIN index on a generated column) and
// its vector, which lives in the row. A forgotten memory is gone from the
// next turn's request, since recalled memories are a transient enrichment
// item, never stored in session history.
//
// Memories told in an end-to-end encrypted room (Who.Encrypted) never leave
// the database: they are not embedded, and queries from such rooms are not
// sent to the embeddings endpoint.
//
// # Ranking
//
// Recall ranks by full text: SQLite FTS5 (bm25, porter stemming) or
// PostgreSQL's text search (ts_rank, english configuration), matching any of
// the query's words but stop words. With embeddings (Config.Embeddings, an
// OpenAI-compatible /v1/embeddings endpoint: Ollama, vLLM, llama.cpp,
// OpenAI) every memory's vector is stored with it, the query is embedded,
// the visible memories' vectors are compared with it in Go (cosine), and
// both rankings are fused by reciprocal rank (1/(60+rank) summed, ties to
// the semantically closer). If the endpoint is down, recall goes on with
// full text alone and Backfill embeds what was stored meanwhile.
//
// # Hooks
//
// Memory plugs in where a plugin would, so operators can see, reorder,
// override or veto it:
//
//   - message:enrich: EnrichHook (Store.Enrich) recalls the requester's most
//     relevant memories and adds them as one transient item (key "memory",
//     Block's byte-stable text, sorted by creation, not rank).
//   - tools: Tools gives the model remember, recall and forget, acting for
//     the tool call's requester.
//   - message:after_response: when extract is on, the plugin sends
//     ExtractionRequest to its extract model, parses the answer with
//     ParseExtraction, emits memory:extracted with the candidates (a
//     transformer: hooks may drop, edit or veto them) and stores what the
//     hooks leave with StoreCandidates.
//
// The plugin also answers !memory with List (rendered by Listing) and
// !memory forget <id|all> with Forget and ForgetAll, calls Configure with
// its settings' agents when it is loaded, runs the tools through CallTool,
// and Backfill now and then when embeddings are configured.
package memory

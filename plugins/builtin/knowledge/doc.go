// Package knowledge is the built-in plugin "knowledge": knowledge bases
// (package knowledge at the module's root) plugged in through the hook
// engine. Enable it with
//
//	plugins:
//	  - builtin: knowledge
//	    settings:
//	      bases:
//	        handbook:
//	          paths: [docs/handbook]       # relative to config.yaml's folder
//	          include: ["*.md", "*.txt"]   # default: *.md, *.markdown, *.txt, *.text, *.pdf
//	          exclude: [drafts]
//	          chunk_size: 1200             # bytes
//	      max_file_bytes: 4194304          # bigger files (and PDFs with more text) are skipped with a warning
//	      max_pdf_bytes: 33554432          # bigger PDF files are skipped with a warning
//	      debounce_ms: 300                 # quiet time after a change before re-indexing
//	      embeddings:                      # optional: hybrid ranking
//	        base_url: http://127.0.0.1:11434/v1
//	        model: nomic-embed-text
//	        api_key: ${EMBEDDINGS_API_KEY}
//	        timeout_ms: 10000
//	      agents:
//	        assistant:
//	          bases: [handbook]            # the search_knowledge tool searches these
//	          auto_enrich: true            # add the top passages to every turn
//	          top_k: 3
//
// On load it opens the index on hookroom's database (plugins.Env.DB),
// creates or migrates its tables, removes bases no longer configured, and
// starts a watcher that indexes every base in the background and re-indexes
// one shortly after a file under its folders changes; Close stops it.
// OpenIndex opens the same index without a watcher, for hookroom
// knowledge reindex and status next to a running server.
//
// # Hooks, tools, commands
//
//   - passages (message:enrich, collector; only agents with auto_enrich):
//     the top passages of the agent's bases for the message, each headed by
//     its path:start-end citation (path:pN for page N of a PDF).
//   - search_knowledge (Tool.Agents: the agents with bases).
//   - !knowledge (admins): each base's files, chunks, last indexing and
//     skipped files; !knowledge reindex [base] re-indexes now.
//
// A room counts as end-to-end encrypted unless the host says otherwise
// (plugins.Env.Encrypted): from such a room, searches rank by full text
// alone, so the message never reaches the embeddings endpoint.
package knowledge

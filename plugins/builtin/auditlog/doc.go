// Package auditlog is the built-in plugin "audit_log": an append-only JSON
// lines record of turns, tool calls and reloads, written to a file in the
// plugin's state directory (<data_dir>/plugins/audit_log/audit.jsonl by
// default) and rotated by size. Enable it with
//
//	plugins:
//	  - builtin: audit_log
//	    settings:
//	      file: audit.jsonl            # file name inside the state directory
//	      max_size_mb: 10              # rotate when the file would grow past this (default 10)
//	      max_files: 5                 # rotated files kept: audit.jsonl.1 … .5 (default 5)
//	      include_text: false          # log message and reply texts (default: lengths only)
//	      include_tool_arguments: true # log tool arguments, secrets masked (default true)
//	      include_tool_results: false  # log tool results (default: lengths only)
//	      max_text_chars: 2000         # longer texts are cut (default 2000)
//	      events:                      # what to log (default: the first five below)
//	        - message:received
//	        - message:after_response
//	        - message:cancelled
//	        - tool:after_call
//	        - config:reloaded
//	        - memory:extracted         # only when named: the memories about to be stored
//	        - todo:item_completed      # custom events may be added
//
// # Records
//
// Each line is one JSON object with "time" (RFC 3339, UTC), "event", and
// the fields of that event that are present:
//
//   - message:received: correlation_id, agent, room_id, thread_id,
//     event_id, sender, requester (when it differs from sender),
//     source_kind, chars, text (include_text), suppressed (when an
//     earlier hook suppressed the message);
//   - message:after_response: the same envelope fields of the message
//     answered, response_event_id, delivery (sent/edited), kind, chars,
//     text, usage (the turn's tokens: model, input_tokens, output_tokens,
//     cached_tokens, total_tokens, model_calls; left out when no model was
//     called, e.g. for a claimed message);
//   - message:cancelled: the envelope fields, reason, detail,
//     visible_event_id, kind, usage (what the model calls used before the
//     turn ended, when any);
//   - tool:after_call: agent, room_id, thread_id, requester, tool,
//     arguments, blocked, error, duration_ms, result_chars, result;
//   - config:reloaded: added_agents, changed_agents, removed_agents,
//     plugin_changes;
//   - memory:extracted: correlation_id, agent, room_id, thread_id,
//     requester, memories (how many the memory plugin is about to store,
//     after the hooks before the audit log), memory_texts ("scope: text";
//     include_text only: they are what people said about themselves);
//   - custom events: source_plugin, agent, room_id, thread_id, sender,
//     payload.
//
// The hooks run at priority 1000, after other plugins' hooks of the same
// event, so message:received records whether the message was suppressed.
//
// # Secrets
//
// The log never holds secrets on purpose: in tool arguments and custom event
// payloads, values under keys that look secret (password, token, secret,
// api_key, authorization, cookie, credential, …key) are replaced by
// "REDACTED", and in every logged text, common credential formats (bearer
// tokens, Matrix access tokens syt_…, sk-… API keys, GitHub and Slack
// tokens, AWS key ids, key=value and ?token= parameters) are masked.
// Message and reply texts and tool results are left out unless enabled.
//
// # Files
//
// Writes are serialized: concurrent turns append whole lines, and instances
// that share a file (the old and the new instance during a reload) share
// one writer. The file is created with mode 0640 on the first record. When
// a record would make it bigger than max_size_mb, the file is renamed to
// audit.jsonl.1 (older ones shift to .2 and so on; the oldest beyond
// max_files is deleted) and a new file is started.
package auditlog

package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hookroom/hookroom/hooks"
)

// The designated mutable fields, by event (JSON names, as the hooks package
// marshals the contexts):
//
//	message:received                  suppress
//	schedule:fired                    message_text, suppress
//	message:enrich, system:enrich     items
//	message:before_response           draft.text, draft.extra, draft.tool_trace, draft.suppress
//	message:final_response_transform  draft.text
//	tool:before_call                  declined, decline_reason, approval_required, approval_reason
//	tool:approval_requested           decision, decision_reason
//	message:claim                     claimed
//
// Every other event has none: a hook of it can only observe (and call host
// methods).

// Apply copies the designated mutable fields present in result (a
// HookInvokeResult's context object) into c, the hook's own copy of the
// context. result is decoded into a fresh value of c's concrete type, so
// nothing c shares with other copies (its envelope's slices, say) is ever
// written; fields absent from result keep their values, and everything that
// is not a designated field of the event is ignored. An empty or null result
// changes nothing.
func Apply(c hooks.Context, result json.RawMessage) error {
	result = bytes.TrimSpace(result)
	if len(result) == 0 || string(result) == "null" {
		return nil
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(result, &keys); err != nil {
		return fmt.Errorf("failed to decode hook result: want a JSON object: %w", err)
	}
	var err error
	switch c := c.(type) {
	case *hooks.MessageReceivedContext:
		err = apply(result, keys, func(f *hooks.MessageReceivedContext) {
			if has(keys, "suppress") {
				c.Suppress = f.Suppress
			}
		})
	case *hooks.ScheduleFiredContext:
		err = apply(result, keys, func(f *hooks.ScheduleFiredContext) {
			if has(keys, "message_text") {
				c.MessageText = f.MessageText
			}
			if has(keys, "suppress") {
				c.Suppress = f.Suppress
			}
		})
	case *hooks.MessageEnrichContext:
		err = apply(result, keys, func(f *hooks.MessageEnrichContext) {
			if has(keys, "items") {
				c.Items = f.Items
			}
		})
		if err == nil {
			err = checkItems(c.Items)
		}
	case *hooks.SystemEnrichContext:
		err = apply(result, keys, func(f *hooks.SystemEnrichContext) {
			if has(keys, "items") {
				c.Items = f.Items
			}
		})
		if err == nil {
			err = checkItems(c.Items)
		}
	case *hooks.BeforeResponseContext:
		var draft map[string]json.RawMessage
		if raw, ok := keys["draft"]; ok && !isNull(raw) {
			if err := json.Unmarshal(raw, &draft); err != nil {
				return fmt.Errorf("failed to decode hook result: draft: %w", err)
			}
		}
		err = apply(result, keys, func(f *hooks.BeforeResponseContext) {
			if has(draft, "text") {
				c.Draft.Text = f.Draft.Text
			}
			// extra and tool_trace may be cleared with null.
			if hasKey(draft, "extra") {
				c.Draft.Extra = f.Draft.Extra
				if isNull(c.Draft.Extra) {
					c.Draft.Extra = nil
				}
			}
			if hasKey(draft, "tool_trace") {
				c.Draft.ToolTrace = f.Draft.ToolTrace
			}
			if has(draft, "suppress") {
				c.Draft.Suppress = f.Draft.Suppress
			}
		})
	case *hooks.FinalResponseContext:
		var draft map[string]json.RawMessage
		if raw, ok := keys["draft"]; ok && !isNull(raw) {
			if err := json.Unmarshal(raw, &draft); err != nil {
				return fmt.Errorf("failed to decode hook result: draft: %w", err)
			}
		}
		err = apply(result, keys, func(f *hooks.FinalResponseContext) {
			if has(draft, "text") {
				c.Draft.Text = f.Draft.Text
			}
		})
	case *hooks.ToolBeforeCallContext:
		err = apply(result, keys, func(f *hooks.ToolBeforeCallContext) {
			if has(keys, "declined") {
				c.Declined = f.Declined
			}
			if has(keys, "decline_reason") {
				c.DeclineReason = f.DeclineReason
			}
			if has(keys, "approval_required") {
				c.ApprovalRequired = f.ApprovalRequired
			}
			if has(keys, "approval_reason") {
				c.ApprovalReason = f.ApprovalReason
			}
		})
	case *hooks.ToolApprovalRequestedContext:
		err = apply(result, keys, func(f *hooks.ToolApprovalRequestedContext) {
			if has(keys, "decision") {
				c.Decision = f.Decision
			}
			if has(keys, "decision_reason") {
				c.DecisionReason = f.DecisionReason
			}
		})
		if err == nil && c.Decision != "" && c.Decision != hooks.ApprovalApprove && c.Decision != hooks.ApprovalDeny {
			err = fmt.Errorf("invalid decision %q (want %q, %q or none)", c.Decision, hooks.ApprovalApprove, hooks.ApprovalDeny)
		}
	case *hooks.MessageClaimContext:
		err = apply(result, keys, func(f *hooks.MessageClaimContext) {
			if f.Claimed != nil {
				c.Claimed = f.Claimed
			}
		})
	default:
		// No designated fields: observe only.
	}
	return err
}

// apply decodes result into a fresh *T (only when it names a field) and
// hands it to copyFields.
func apply[T any](result json.RawMessage, keys map[string]json.RawMessage, copyFields func(*T)) error {
	if len(keys) == 0 {
		return nil
	}
	f := new(T)
	if err := json.Unmarshal(result, f); err != nil {
		return fmt.Errorf("failed to decode hook result: %w", err)
	}
	copyFields(f)
	return nil
}

// has reports whether key is present with a non-null value.
func has(m map[string]json.RawMessage, key string) bool {
	v, ok := m[key]
	return ok && !isNull(v)
}

func hasKey(m map[string]json.RawMessage, key string) bool {
	_, ok := m[key]
	return ok
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

func checkItems(items []hooks.EnrichmentItem) error {
	var errs []error
	for i, it := range items {
		if it.Key == "" {
			errs = append(errs, fmt.Errorf("item %d has no key", i))
		}
		if !it.CachePolicy.Valid() {
			errs = append(errs, fmt.Errorf("item %q: invalid cache_policy %q (want volatile or stable)", it.Key, it.CachePolicy))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid enrichment items: %w", errors.Join(errs...))
	}
	return nil
}

// Result returns the designated mutable fields of c as a HookInvokeResult
// context object: what a plugin answers after its hook changed c. Only the
// fields of c's event are included, so the answer stays small.
func Result(c hooks.Context) (json.RawMessage, error) {
	var v any
	switch c := c.(type) {
	case *hooks.MessageReceivedContext:
		v = struct {
			Suppress bool `json:"suppress"`
		}{c.Suppress}
	case *hooks.ScheduleFiredContext:
		v = struct {
			MessageText string `json:"message_text"`
			Suppress    bool   `json:"suppress"`
		}{c.MessageText, c.Suppress}
	case *hooks.MessageEnrichContext:
		v = itemsResult{c.Items}
	case *hooks.SystemEnrichContext:
		v = itemsResult{c.Items}
	case *hooks.BeforeResponseContext:
		type draft struct {
			Text      string                 `json:"text"`
			Extra     json.RawMessage        `json:"extra"`
			ToolTrace []hooks.ToolTraceEntry `json:"tool_trace"`
			Suppress  bool                   `json:"suppress"`
		}
		d := draft{c.Draft.Text, c.Draft.Extra, c.Draft.ToolTrace, c.Draft.Suppress}
		if len(d.Extra) == 0 {
			d.Extra = json.RawMessage("null")
		}
		v = struct {
			Draft draft `json:"draft"`
		}{d}
	case *hooks.FinalResponseContext:
		v = struct {
			Draft struct {
				Text string `json:"text"`
			} `json:"draft"`
		}{Draft: struct {
			Text string `json:"text"`
		}{c.Draft.Text}}
	case *hooks.ToolBeforeCallContext:
		v = struct {
			Declined         bool   `json:"declined"`
			DeclineReason    string `json:"decline_reason"`
			ApprovalRequired bool   `json:"approval_required"`
			ApprovalReason   string `json:"approval_reason"`
		}{c.Declined, c.DeclineReason, c.ApprovalRequired, c.ApprovalReason}
	case *hooks.ToolApprovalRequestedContext:
		v = struct {
			Decision       hooks.ApprovalDecision `json:"decision"`
			DecisionReason string                 `json:"decision_reason"`
		}{c.Decision, c.DecisionReason}
	case *hooks.MessageClaimContext:
		if c.Claimed == nil {
			return json.RawMessage("{}"), nil
		}
		v = struct {
			Claimed *hooks.ClaimResponse `json:"claimed"`
		}{c.Claimed}
	default:
		return json.RawMessage("{}"), nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("failed to encode hook result: %w", err)
	}
	return raw, nil
}

type itemsResult struct {
	Items []hooks.EnrichmentItem `json:"items"`
}

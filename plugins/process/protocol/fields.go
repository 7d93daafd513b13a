package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/hookroom/hookroom/hooks"
)

// The designated mutable fields of each event are hooks.MutableFields of its
// context (JSON paths, as the hooks package marshals the contexts):
//
//	message:received                  suppress
//	schedule:fired                    message_text, suppress
//	message:enrich, system:enrich     items
//	message:before_response           draft.text, draft.extra, draft.tool_trace, draft.suppress
//	message:final_response_transform  draft.text
//	tool:before_call                  declined, decline_reason, approval_required, approval_reason
//	tool:approval_requested           decision, decision_reason
//	message:claim                     claimed
//	plugin:before_install             declined, decline_reason
//	model:resolve                     model
//	model:request                     messages, tools, refused, refuse_reason
//	tool:result                       content
//	memory:extracted                  memories, vetoed, veto_reason
//
// Every other event has none: a hook of it can only observe (and call host
// methods). plugins/process's TestDesignatedFieldsAreDocumented keeps this
// table and docs/plugin-protocol.md true.

// Apply copies the designated mutable fields present in result (a
// HookInvokeResult's context object) into c, the hook's own copy of the
// context. result is decoded into a fresh value of c's concrete type, so
// nothing c shares with other copies (its envelope's slices, say) is ever
// written; fields absent from result keep their values (as do fields given
// as null, except those a null clears), and everything that is not a
// designated field of the event is ignored. An empty or null result changes
// nothing.
func Apply(c hooks.Context, result json.RawMessage) error {
	result = bytes.TrimSpace(result)
	if len(result) == 0 || string(result) == "null" {
		return nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(result, &top); err != nil {
		return fmt.Errorf("failed to decode hook result: want a JSON object: %w", err)
	}
	fields := hooks.MutableFields(c)
	if len(fields) == 0 || len(top) == 0 {
		return nil
	}
	objects := map[string]map[string]json.RawMessage{"": top}
	var given []hooks.MutableField
	for _, f := range fields {
		raw, ok, err := lookup(objects, f.Path)
		if err != nil {
			return err
		}
		if ok && (f.Nullable || !isNull(raw)) {
			given = append(given, f)
		}
	}
	if len(given) == 0 {
		return nil
	}
	fresh := reflect.New(reflect.TypeOf(c).Elem()).Interface().(hooks.Context)
	if err := json.Unmarshal(result, fresh); err != nil {
		return fmt.Errorf("failed to decode hook result: %w", err)
	}
	for _, f := range given {
		f.Take(c, fresh)
	}
	return check(c)
}

// lookup finds the value at a dotted path in a decoded result; objects
// caches the nested objects decoded so far, by path ("" is the result).
func lookup(objects map[string]map[string]json.RawMessage, path string) (json.RawMessage, bool, error) {
	parent, key := "", path
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		parent, key = path[:i], path[i+1:]
	}
	obj, ok := objects[parent]
	if !ok {
		raw, found, err := lookup(objects, parent)
		if err != nil || !found || isNull(raw) {
			return nil, false, err
		}
		if err := json.Unmarshal(raw, &obj); err != nil {
			return nil, false, fmt.Errorf("failed to decode hook result: %s: %w", parent, err)
		}
		objects[parent] = obj
	}
	raw, found := obj[key]
	return raw, found, nil
}

// check validates what a plugin's answer may set beyond its JSON type.
func check(c hooks.Context) error {
	switch c := c.(type) {
	case *hooks.MessageEnrichContext:
		return checkItems(c.Items)
	case *hooks.SystemEnrichContext:
		return checkItems(c.Items)
	case *hooks.ToolApprovalRequestedContext:
		if c.Decision != "" && c.Decision != hooks.ApprovalApprove && c.Decision != hooks.ApprovalDeny {
			return fmt.Errorf("invalid decision %q (want %q, %q or none)", c.Decision, hooks.ApprovalApprove, hooks.ApprovalDeny)
		}
	}
	return nil
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
	out := map[string]any{}
	for _, f := range hooks.MutableFields(c) {
		obj, key := out, f.Path
		for {
			i := strings.IndexByte(key, '.')
			if i < 0 {
				break
			}
			next, ok := obj[key[:i]].(map[string]any)
			if !ok {
				next = map[string]any{}
				obj[key[:i]] = next
			}
			obj, key = next, key[i+1:]
		}
		obj[key] = f.Value(c)
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("failed to encode hook result: %w", err)
	}
	return raw, nil
}

package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/iwf-server/iwf-server/engine"
)

// nameFields are the request members that name something: workflow, run
// and state ids, channel names, attribute keys, RPC and timer names. Their
// values must be valid UTF-8 and at most engine.MaxNameBytes long.
var nameFields = map[string]bool{
	"workflowId": true, "workflowRunId": true, "iwfWorkflowType": true,
	"startStateId": true, "stateId": true, "workflowStateId": true,
	"stateExecutionId": true, "workflowStateExecutionId": true,
	"signalChannelName": true, "channelName": true, "key": true,
	"rpcName": true, "timerCommandId": true, "commandId": true,
	"waitForKey": true, "requestId": true,
}

// nameListFields are the request members whose value is a list of names:
// the keys a read or an RPC's loading policy names, and the states a start
// waits on. Each string in the list is checked as a name.
var nameListFields = map[string]bool{
	"keys": true, "partialLoadingKeys": true, "lockingKeys": true,
	"waitForCompletionStateIds": true, "waitForCompletionStateExecutionIds": true,
}

// checkBody refuses a JSON request body that decoding would silently
// change, or whose names are too long: bytes that are not UTF-8 and
// unpaired UTF-16 surrogate escapes both decode to U+FFFD, so two
// different ids would become one workflow.
func checkBody(body []byte) error {
	if !utf8.Valid(body) {
		return errors.New("the request body is not valid UTF-8")
	}
	if bytes.Contains(body, []byte(`\u`)) || bytes.Contains(body, []byte(`\U`)) {
		if err := checkEscapes(body); err != nil {
			return err
		}
	}
	return checkNames(body)
}

// checkEscapes finds \u escapes of unpaired UTF-16 surrogates.
func checkEscapes(b []byte) error {
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			continue
		}
		if b[i+1] != 'u' {
			i++ // skip the escaped character (it may be a backslash)
			continue
		}
		r, ok := hex4(b, i+2)
		if !ok {
			continue // malformed: the JSON decoder reports it
		}
		switch {
		case utf16.IsSurrogate(r) && r < 0xdc00: // high: a low one must follow
			if lo, ok := hex4(b, i+8); ok && i+7 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' && lo >= 0xdc00 && lo <= 0xdfff {
				i += 11
				continue
			}
			return fmt.Errorf("the request body has an unpaired UTF-16 surrogate \\u%04x", r)
		case utf16.IsSurrogate(r):
			return fmt.Errorf("the request body has an unpaired UTF-16 surrogate \\u%04x", r)
		}
		i += 5
	}
	return nil
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[at:at+4]), 16, 32)
	return rune(n), err == nil
}

// checkNames walks the JSON tokens and checks the string values of the
// members in nameFields and the strings in the lists of nameListFields.
func checkNames(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	// Per open container: is it an object, and is the next token a key?
	// For a list, list names the member it is the value of when that is
	// one of nameListFields.
	type frame struct {
		object, wantKey bool
		list            string
	}
	var stack []frame
	var member string
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return nil // malformed JSON: validation reports it with context
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				f := frame{object: d == '{', wantKey: d == '{'}
				if n := len(stack); n > 0 && stack[n-1].object {
					stack[n-1].wantKey = true
					if d == '[' && nameListFields[member] {
						f.list = member
					}
				}
				stack = append(stack, f)
			default:
				stack = stack[:len(stack)-1]
			}
			continue
		}
		n := len(stack)
		if n > 0 && stack[n-1].list != "" {
			if s, ok := tok.(string); ok {
				if err := engine.CheckName(stack[n-1].list, s); err != nil {
					return err
				}
			}
			continue
		}
		if n > 0 && stack[n-1].object {
			if stack[n-1].wantKey {
				member, _ = tok.(string)
				stack[n-1].wantKey = false
				continue
			}
			stack[n-1].wantKey = true
			if s, ok := tok.(string); ok && nameFields[member] {
				if err := engine.CheckName(member, s); err != nil {
					return err
				}
			}
		}
	}
}

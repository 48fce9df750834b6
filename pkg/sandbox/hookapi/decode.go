package hookapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/pcsync/pcsync/pkg/sandbox"
)

// decode reads a hook's params into v; fields v does not list are ignored.
// A failure is a *sandbox.BadRequestError naming the field.
func decode(body []byte, v any) error {
	err := json.Unmarshal(body, v)
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &te) && te.Field != "":
		return &sandbox.BadRequestError{Field: jsonPath(te.Field), Err: fmt.Errorf("want %s, got a JSON %s", jsonKind(te.Type), te.Value)}
	case errors.As(err, &se):
		return &sandbox.BadRequestError{Err: fmt.Errorf("not JSON (at byte %d): %w", se.Offset, err)}
	}
	return &sandbox.BadRequestError{Err: err}
}

// jsonPath is a decode error's field path without the Go name of the
// embedded HookBase, which encoding/json puts in it.
func jsonPath(field string) string {
	return strings.TrimPrefix(field, "HookBase.")
}

// jsonKind names the JSON a Go type decodes from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

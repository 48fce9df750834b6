package result

import (
	"reflect"
	"testing"
	"time"
)

// TestMapStringsCoversEveryStringField: every string of a result (found by
// reflection, so that a field added later is not forgotten) goes through
// MapStrings' function.
func TestMapStringsCoversEveryStringField(t *testing.T) {
	r := New("x", "x", "x", "x")
	r.Fail(StatusFailed, ErrInternal, "x")
	r.Signal, r.SessionID, r.Summary, r.Model = Ptr("x"), Ptr("x"), Ptr("x"), Ptr("x")
	r.UsageBasis = Ptr(UsageBasis("x"))
	r.Job = &Job{Namespace: "x", Name: "x", Pod: "x"}
	r.SetTimes(time.Now(), time.Now())
	r.MapStrings(func(string) string { return "mapped" })
	var check func(path string, v reflect.Value)
	check = func(path string, v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				check(path, v.Elem())
			}
		case reflect.Struct:
			if v.Type() == reflect.TypeOf(time.Time{}) {
				return
			}
			for i := 0; i < v.NumField(); i++ {
				check(path+"."+v.Type().Field(i).Name, v.Field(i))
			}
		case reflect.String:
			if v.String() != "mapped" {
				t.Errorf("%s = %q: MapStrings does not map it", path, v.String())
			}
		}
	}
	check("RunResult", reflect.ValueOf(r))
}

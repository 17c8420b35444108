package inbox

import (
	"bytes"
	"testing"
	"time"
)

// The records written by hand are byte for byte what encoding/json writes.
func FuzzEncodeMatchesJSON(f *testing.F) {
	f.Add(uint8(0), uint64(1), 0, "", uint8(0), int64(1764000000123456789))
	f.Add(uint8(3), uint64(42), 2, "1234567890123456789", uint8(0), int64(0))
	f.Add(uint8(2), uint64(7), 0, "", uint8(Answered), int64(-5))
	f.Add(uint8(3), uint64(7), -1, "m\"1", uint8(0), int64(99))
	f.Fuzz(func(t *testing.T, kind uint8, id uint64, chunk int, message string, state uint8, nanos int64) {
		types := []string{recStart, recTool, recFinish, recDeliver}
		r := record{T: types[int(kind)%len(types)], ID: id, Chunk: chunk, Message: message, State: State(state), At: time.Unix(0, nanos).UTC()}
		want, wantErr := encodeWithJSON(r)
		got, err := encode(r)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("encode error %v, encoding/json's %v", err, wantErr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("encode wrote\n%s\nencoding/json\n%s", got[frameHeader:], want[frameHeader:])
		}
		if err == nil {
			back, n, err := decode(got)
			if err != nil || n != len(got) || back.ID != r.ID || back.T != r.T || !back.At.Equal(r.At) {
				t.Fatalf("decode(encode(r)) = %+v, %d, %v", back, n, err)
			}
		}
	})
}

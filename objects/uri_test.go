package objects

import (
	"path/filepath"
	"testing"
)

func TestParseStageURI(t *testing.T) {
	cwd, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in      string
		want    StageURI
		wantErr bool
	}{
		{in: "", wantErr: true},
		{in: "file:///data/stage", want: StageURI{Kind: KindLocal, Path: "/data/stage"}},
		{in: "file:///data/stage/", want: StageURI{Kind: KindLocal, Path: "/data/stage"}},
		{in: "file:///data/x/../stage", want: StageURI{Kind: KindLocal, Path: "/data/stage"}},
		{in: "file://localhost/data", want: StageURI{Kind: KindLocal, Path: "/data"}},
		{in: "file://otherhost/data", wantErr: true},
		{in: "file://relative/dir", wantErr: true}, // "relative" parses as a host
		{in: "/abs/dir", want: StageURI{Kind: KindLocal, Path: "/abs/dir"}},
		{in: "/abs/dir/", want: StageURI{Kind: KindLocal, Path: "/abs/dir"}},
		{in: "rel/dir", want: StageURI{Kind: KindLocal, Path: filepath.Join(cwd, "rel/dir")}},
		{in: "s3://bucket", want: StageURI{Kind: KindS3, Bucket: "bucket"}},
		{in: "s3://bucket/", want: StageURI{Kind: KindS3, Bucket: "bucket"}},
		{in: "s3://bucket/a/b/", want: StageURI{Kind: KindS3, Bucket: "bucket", Prefix: "a/b"}},
		{in: "s3:///prefix", wantErr: true},
		{in: "gs://bucket", wantErr: true},
		{in: "http://%zz", wantErr: true},
	} {
		got, err := ParseStageURI(tc.in)
		if tc.wantErr {
			if err == nil {
				t.Errorf("ParseStageURI(%q) = %+v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseStageURI(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			continue
		}
		// The canonical form parses back to the same stage.
		again, err := ParseStageURI(got.String())
		if err != nil || again != got {
			t.Errorf("ParseStageURI(%q) = %+v, %v; want %+v", got.String(), again, err, got)
		}
	}
}

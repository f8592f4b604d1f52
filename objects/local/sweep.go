package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"strings"
	"time"

	"github.com/lakedata/lake/objects"
)

var _ objects.Sweeper = (*Store)(nil)

// Leftovers lists the temp files in TempDir last written before before:
// what writes that crashed before their rename left (Open removes those
// older than StaleTempAge by itself).
func (s *Store) Leftovers(ctx context.Context, before time.Time) iter.Seq2[objects.Leftover, error] {
	return func(yield func(objects.Leftover, error) bool) {
		d, err := s.root.Open(TempDir)
		if errors.Is(err, fs.ErrNotExist) {
			return
		}
		if err != nil {
			yield(objects.Leftover{}, fmt.Errorf("local: leftovers: %w", err))
			return
		}
		entries, err := d.ReadDir(-1)
		d.Close()
		if err != nil {
			yield(objects.Leftover{}, fmt.Errorf("local: leftovers: %w", err))
			return
		}
		for _, e := range entries {
			if ctx.Err() != nil {
				yield(objects.Leftover{}, ctx.Err())
				return
			}
			if !e.Type().IsRegular() {
				continue
			}
			fi, err := e.Info()
			if err != nil || !fi.ModTime().Before(before) {
				continue // gone meanwhile, or young
			}
			l := objects.Leftover{Kind: objects.LeftoverTemp, Key: TempDir + "/" + e.Name(), Size: fi.Size(), Started: fi.ModTime()}
			if !yield(l, nil) {
				return
			}
		}
	}
}

// RemoveLeftover removes a temp file Leftovers listed.
func (s *Store) RemoveLeftover(_ context.Context, l objects.Leftover) error {
	name, ok := strings.CutPrefix(l.Key, TempDir+"/")
	if l.Kind != objects.LeftoverTemp || !ok || name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return fmt.Errorf("local: %q is not a temp file of the stage", l.Key)
	}
	err := s.root.Remove(l.Key)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("local: remove %s: %w", l.Key, objects.ErrNotFound)
	}
	return err
}

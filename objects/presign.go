package objects

import (
	"context"
	"time"
)

// Presigner is the optional power of a stage to hand out URLs that read
// one object without the stage's credentials (S3 presigned GET URLs,
// DESIGN §12). Find it with a type assertion on the Store.
//
// A URL is a secret for as long as it works: whoever holds it reads the
// object. Implementations never log it, and their errors never carry it.
type Presigner interface {
	// PresignGet returns a URL that a plain HTTP GET reads the object at
	// key with, until expires from now. It makes no request: the object
	// need not exist (a GET of the URL then fails), so the caller checks
	// that it does when that matters. An invalid key is
	// wire.ErrInvalidKey; expires must be positive and within what the
	// backend can sign (S3: 7 days).
	PresignGet(ctx context.Context, key string, expires time.Duration) (string, error)
}

package model

import "github.com/commitcollect/backend/model/keys"

// Key is the primary key of an item in a PK/SK table (built and parsed only
// by model/keys).
type Key = keys.Key

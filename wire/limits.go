package wire

// MaxAppendBytes bounds one FILE append (lake.file.Append and its record
// batches): the metadata service refuses an append whose Arrow data is
// larger (its Config.MaxAppendBytes defaults to this), and the query relay
// holds at most this much of one append's frames for a resend. One
// constant, so the relay never refuses what meta would take nor holds what
// meta would refuse; a client splits bigger appends.
const MaxAppendBytes = 256 << 20

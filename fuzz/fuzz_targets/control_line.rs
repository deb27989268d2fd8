//! Control-socket request lines: any bytes, as the server reads one line.
//! Decoding never panics, and a request that decodes reads back the same
//! from the line the client would write for it (so what the server acts on
//! is what a client can say), stays one line, and carries no ttl beyond the
//! protocol's bound.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pincer_model::{
    control::{ControlRequest, MAX_REQUEST_LINE},
    vote::{Lifetime, MAX_TTL},
};

fuzz_target!(|data: &[u8]| {
    // The server never hands a longer line to the decoder.
    if data.len() > MAX_REQUEST_LINE + 1 {
        return;
    }
    let Ok(request) = ControlRequest::from_line(data) else {
        return;
    };
    if let ControlRequest::Approve {
        lifetime: Lifetime::Ttl(ttl),
        ..
    } = &request
    {
        assert!(*ttl <= MAX_TTL, "a ttl of {ttl:?} was accepted");
    }
    let mut line = serde_json::to_vec(&request).expect("a request serializes");
    assert!(!line.contains(&b'\n'), "a request written on two lines");
    line.push(b'\n');
    let again = ControlRequest::from_line(&line)
        .unwrap_or_else(|error| panic!("{request:?} does not read back: {error}"));
    assert_eq!(again, request);
});

//! Ring-buffer records: the input's first `size_of::<AccessEvent>()` bytes
//! are a record as the kernel would write it, the rest the text of
//! `/proc/self/mountinfo`. Decoding and sanitizing never panic, a short
//! record is dropped, and whatever the bytes, what people and voters see is
//! escaped (no control character in a name or path), bounded (a path of at
//! most `MAX_PATH_CHARS` and pincer's cut mark), and a request reads back
//! from its JSON as it was sent (less the kernel identities, which stay in
//! the twin).

#![no_main]

use libfuzzer_sys::fuzz_target;
use pincer_common::{AccessEvent, COMPONENT_LEN};
use pincer_fuzz::assert_escaped;
use pincer_model::{
    audit::Record,
    escape::CUT,
    events::{self, MAX_PATH_CHARS, Mounts},
    request::Request,
};

fuzz_target!(|data: &[u8]| {
    let size = size_of::<AccessEvent>();
    let Some(event) = events::parse(data) else {
        assert!(data.len() < size, "a whole record was dropped");
        return;
    };
    let mounts = Mounts::parse(&String::from_utf8_lossy(&data[size..]));

    let decision = events::decision(&event, &mounts);
    assert_escaped("comm", &decision.comm);
    assert_escaped("path", &decision.path);
    assert!(decision.path.len() <= MAX_PATH_CHARS + CUT.len_utf8());
    let line = serde_json::to_string(&Record::Decision(&decision)).expect("a decision serializes");
    assert!(!line.contains('\n'), "an audit record on two lines");

    let request = events::sanitize(&event, &mounts, "fuzz", None, Vec::new());
    assert_escaped("comm", &request.comm);
    assert_escaped("path", &request.path);
    assert!(request.path.len() <= MAX_PATH_CHARS + CUT.len_utf8());
    let json = serde_json::to_string(&request).expect("a request serializes");
    let back: Request = serde_json::from_str(&json).expect("a request reads back");
    assert_eq!(back, request.as_sent());

    if let Some(name) = events::created_name(&event) {
        assert!(name.len() < COMPONENT_LEN && !name.contains(&0));
    }
});

//! The running example of a mission with assets, shared by the model's
//! tests and the guest kernel's: Alice's email names the image to upload.

/// The running example's mission: Alice's email, `~/mail/alice.eml`, is
/// read, and the images to upload (at most `images` of them, under `~` or
/// `tmp`) are found in it; `more` follows on line 12.
pub fn upload_mission(tmp: &str, images: u32, more: &str) -> String {
    format!(
        r#"[mission]
name = "upload"
[[asset]]
id = "email"
path = "~/mail/alice.eml"
ops = ["read"]
[[asset]]
id = "image"
found_in = "email"
ops = ["read"]
constraints = {{ under = ["~", "{tmp}"], glob = "*.{{png,jpg,jpeg}}", max_count = {images} }}
{more}"#
    )
}

//! `/proc/self/mountinfo`: whether the procfs the exporter reads hides other users'
//! processes (`hidepid`, `subset=pid` aside).

use super::ParseError;

/// Whether the proc filesystem mounted at `mount_point` has `hidepid` set to hide or deny
/// other users' processes (`1`, `2`, `noaccess`, `invisible`). An error when no proc
/// mount is at that point (a fixture tree).
pub fn hides_processes(text: &str, mount_point: &str) -> Result<bool, ParseError> {
    let found = text.lines().find_map(|line| {
        let (mount, fs) = line.split_once(" - ")?;
        let point = mount.split(' ').nth(4)?;
        let mut fs = fs.split(' ');
        if point != mount_point || fs.next()? != "proc" {
            return None;
        }
        let options = fs.nth(1).unwrap_or("");
        Some(options.split(',').any(|o| {
            matches!(
                o.strip_prefix("hidepid="),
                Some("1" | "2" | "noaccess" | "invisible")
            )
        }))
    });
    found.ok_or(ParseError::Missing("proc mount at the point"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidepid_is_read_from_the_proc_mount_at_the_point() {
        let text = "22 27 0:21 / /proc rw,relatime - proc proc rw\n\
                    30 27 0:40 / /host/proc rw,relatime - proc proc rw,hidepid=invisible\n\
                    31 27 0:41 / /other rw - tmpfs tmpfs rw,hidepid=2\n\
                    32 27 0:42 / /p2 rw - proc proc rw,hidepid=ptraceable\n";
        assert_eq!(hides_processes(text, "/proc"), Ok(false));
        assert_eq!(hides_processes(text, "/host/proc"), Ok(true));
        assert!(hides_processes(text, "/other").is_err());
        assert_eq!(hides_processes(text, "/p2"), Ok(false));
        assert!(hides_processes(text, "/nowhere").is_err());
        assert!(hides_processes("garbage\n - \n", "/proc").is_err());
    }
}

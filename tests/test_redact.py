from hypothesis import given
from hypothesis import strategies as st

from sidecar.redact import MASK, mask_headers, mask_url


def test_password_in_url_is_masked_and_user_kept() -> None:
    assert mask_url("http://alice:s3cret@am:9093/api/v2") == f"http://alice:{MASK}@am:9093/api/v2"


def test_token_only_userinfo_is_masked() -> None:
    assert mask_url("https://tok123@collector:4318/v1/traces") == f"https://{MASK}@collector:4318/v1/traces"


def test_credential_query_values_are_masked_others_kept() -> None:
    out = mask_url("https://es:9200/?api_key=abc&timeout=5")
    assert "abc" not in out and "timeout=5" in out


def test_plain_url_unchanged() -> None:
    assert mask_url("http://triton:8002/metrics") == "http://triton:8002/metrics"


def test_malformed_url_still_masks() -> None:
    assert "pw" not in mask_url("http://u:pw@host:notaport/")


def test_headers_masked_case_insensitively() -> None:
    assert mask_headers({"Authorization": "Bearer x", "X-Scope-OrgID": "t1"}) == {
        "Authorization": MASK,
        "X-Scope-OrgID": "t1",
    }


@given(
    st.text(
        alphabet=st.characters(blacklist_characters="@:/?#[]%", blacklist_categories=("Cs", "Cc")),
        min_size=4,
        max_size=30,
    )
)
def test_any_password_never_survives(tail: str) -> None:
    pw = "Zq9" + tail  # a prefix no other part of the URL contains, so a hit means the password leaked
    assert "Zq9" not in mask_url(f"http://user:{pw}@host:1234/p")

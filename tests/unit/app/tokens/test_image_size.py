"""Image sizes read from real PNG, GIF, JPEG and WebP headers, in bytes and in base64."""

from __future__ import annotations

import base64

import pytest

from app.tokens.image_size import image_size, size_of_base64, size_of_data_url
from tests.support import images


@pytest.mark.parametrize(
    "make", [images.png, images.gif, images.jpeg, images.webp_vp8x, images.webp_lossless, images.webp_lossy]
)
@pytest.mark.parametrize("size", [(1, 1), (37, 900), (1024, 768), (4000, 3000)])
def test_sizes_are_read_from_every_format(make, size):
    if make is images.png and size[0] * size[1] > 1_000_000:
        size = (1500, 700)  # keep the test's real pixel data small
    assert image_size(make(*size)) == size
    assert size_of_base64(base64.b64encode(make(*size)).decode()) == size


def test_a_jpeg_whose_metadata_comes_first_is_read_past_it():
    jpeg = images.jpeg(1920, 1080, exif_bytes=20_000)
    assert size_of_base64(base64.b64encode(jpeg).decode()) == (1920, 1080)


def test_data_urls_and_unreadable_data():
    assert size_of_data_url(images.data_url(images.png(640, 480), "image/png")) == (640, 480)
    assert size_of_data_url("https://example.com/cat.png") is None
    assert size_of_data_url("data:image/png;base64,!!!not base64!!!") is None
    assert size_of_data_url("data:image/png;base64,iVBORw0KGgo=") is None  # a signature and nothing else
    assert image_size(b"BM\x00\x00") is None  # BMP: not a format providers take
    assert image_size(images.png(3, 2)[:20]) is None

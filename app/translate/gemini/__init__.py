"""Google's Gemini API (``generateContent``): its client's side (``client.py``: a request → canonical;
``answer.py``: canonical answers and streams → its wire), and its upstream's side."""
